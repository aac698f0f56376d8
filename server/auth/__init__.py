"""Authentication and authorization, as mongod has them.

Owns who a connection is (`principals`), how it proves it (SCRAM conversations and the
users stored in `admin.system.users`), and what it may do (MongoDB's built-in roles, their
privileges, and the privileges each command requires). A service: commands and the
dispatcher import it; it imports storage through the storage service only.
"""
