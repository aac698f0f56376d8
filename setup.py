"""Build of the optional native core; the project metadata lives in pyproject.toml.

`storage._native` is the Rust crate in `native/` (PyO3, stable ABI), built by
setuptools-rust in release mode (`debug=False`: setuptools-rust would otherwise build
editable installs, the README's `pip install -e .`, without optimisation, several times
slower). It is optional: without a Rust toolchain (or when the
build fails) the install goes on and the Python reference does the work; the server says
at start-up which path it uses (`storage.native_core.describe()`).
"""

from setuptools import setup
from setuptools_rust import Binding, RustExtension

setup(
    rust_extensions=[
        RustExtension(
            "storage._native",
            path="native/Cargo.toml",
            binding=Binding.PyO3,
            py_limited_api=True,
            features=["extension-module"],
            optional=True,
            debug=False,
        )
    ]
)
