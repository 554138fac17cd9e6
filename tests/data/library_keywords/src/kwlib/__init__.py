"""A package whose __init__ needs what a worker does not have (a training stack), and reads an import-time variable."""
import os

if os.environ.get("KWLIB_BACKEND") != "stand-in":
    raise ImportError("kwlib needs KWLIB_BACKEND=stand-in (or its whole training stack)")
