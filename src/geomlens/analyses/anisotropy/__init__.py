"""Anisotropy and rogue dimensions (Ethayarajh, EMNLP 2019; Timkey & van Schijndel, EMNLP
2021, arXiv 2109.04404): per layer the expected cosine between hidden states of random token
pairs, each dimension's share of it, and the same after standardising each dimension."""
