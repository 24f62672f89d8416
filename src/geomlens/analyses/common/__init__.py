"""What several analyses compute with: spectra of positional parts, readouts over the
vocabulary in chunks, per-layer work in threads."""
