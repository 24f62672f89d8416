"""The options every command shares, declared once, and the configs made from them."""
