"""What belongs to this machine and never travels with a checkout: the key that signs what the bot writes into its
cache folders (signing), where those folders are (cache_dirs), and whether a file or folder may be written here
(writable)."""
