"""What a run is configured with: read from files and flags, validated, importing nothing of the harness."""
