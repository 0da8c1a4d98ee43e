"""Frames chosen for the question (``select=``): the image-text encoder, the candidate pool of each
video embedded once, and the selector an adapter asks for a question's frames
(docs/selection.md)."""
