"""bucketd's server layer: listener, connections, command dispatch, cursors, sessions."""
