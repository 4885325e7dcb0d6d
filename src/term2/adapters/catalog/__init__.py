"""Model catalogs."""
