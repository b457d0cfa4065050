"""The notebooks' helpers, one module per notebook (``nb01`` .. ``nb05``; each notebook imports only its own),
over :mod:`.context` (parameters and data), :mod:`.display` (inline figures and tables) and :mod:`.runner`
(papermill + nbconvert, ``python -m fp4moe_diag report``)."""
