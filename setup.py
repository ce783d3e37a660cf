"""Build of the optional compiled codec accelerator (everything else is in pyproject.toml).

``trocket.codecs._accel`` is compiled from ``codecs/_accel.pyx`` with Cython when a C
compiler is there; the extension is optional, so without one the install still
succeeds and trocket runs its pure-Python codecs (see ``codecs/accel.py``).
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # no Cython (a build without the build requirements): pure path
    ext_modules = []
else:
    ext_modules = cythonize(
        [Extension("trocket.codecs._accel", ["codecs/_accel.pyx"], optional=True)],
        compiler_directives={"language_level": 3},
    )

setup(ext_modules=ext_modules)
