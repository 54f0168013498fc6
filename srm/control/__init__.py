"""srm-control: the command-line interface, a thin layer over the library."""
