"""Attention in the position/context basis (Song & Zhong 2023): logits split into
position/context parts, W_QK in the positional basis, induction heads. ``geomlens
decompose`` runs it after the decomposition."""
