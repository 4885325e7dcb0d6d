"""Folder locks shared by the term2 processes of one user (ADR 0038): `flock_folders.FlockFolderLocks`, in
`folder.lock_folder`; the package imports neither, so a caller needing only the path loads only that."""
