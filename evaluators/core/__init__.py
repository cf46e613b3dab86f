"""The base every layer reads: records, English text, masking, the uncertainty band, bootstrap intervals."""
