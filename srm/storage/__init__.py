"""Where the metrics and the sync history are kept: the Delta tables and their locations."""
