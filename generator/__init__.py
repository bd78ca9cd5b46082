"""The generator: load and validate a catalogue, expand it into cases, render the pytest suite.

Also the code generated suites call at run time (plugin, execute) and the
rocMLIR catalogue importer.
"""
