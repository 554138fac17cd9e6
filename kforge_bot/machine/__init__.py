"""What belongs to this machine and never travels with a checkout: the key that signs what the bot writes into its
cache folders (signing), and where those folders are (cache_dirs)."""
