"""Folder locks shared by the term2 processes of one user (ADR 0038)."""

from term2.adapters.locks.flock_folders import FlockFolderLocks, lock_folder

__all__ = ["FlockFolderLocks", "lock_folder"]
