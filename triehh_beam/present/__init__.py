"""Presentation: what the commands print and draw, from published outputs."""
