"""`fabric-jev bench`: placeholder replaced below."""
