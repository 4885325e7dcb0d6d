"""`term2 exec`'s driving adapter: one turn from a terminal or a script, over the same use cases as ACP."""
