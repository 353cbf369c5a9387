"""importance stage."""
