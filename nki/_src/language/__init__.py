"""The functions of nki.language other than the tile-math operators (those are in ``alu``);
nki.language re-exports them."""
