"""A kernel module that fails while being imported (for ImplError tests)."""
raise ImportError("libmykernels.so: cannot open shared object file")
