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
        [Extension("trocket.codecs._accel", ["codecs/_accel.pyx"])],
        compiler_directives={"language_level": 3},
    )
    for ext in ext_modules:  # cythonize's copies drop the flag: a failed compile is a warning
        ext.optional = True

setup(ext_modules=ext_modules)
