def launch_settings(n_cols):
    block = 1
    while block < n_cols:
        block *= 2
    return block, 4 if block < 2048 else 8
