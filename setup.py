"""Build of the optional C extension; the project metadata lives in pyproject.toml.

`storage.bsoncolumn._native` (a native encoder for uniform BSONColumns) is optional: when
it cannot be compiled the install goes on and `storage.bsoncolumn.native` falls back to
the Python builder.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "storage.bsoncolumn._native",
            ["storage/bsoncolumn/_native.c"],
            optional=True,
        )
    ]
)
