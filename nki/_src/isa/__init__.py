"""The instructions of nki.isa, one module per family; nki.isa re-exports them."""
