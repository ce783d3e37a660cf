"""The ``spark-submit`` entry point: the same job as ``trocket analyze``.

    spark-submit --master spark://HOST:7077 "$(python -c 'import trocket.spark.submit as m; print(m.__file__)')" \
        CAPTURE... --out DIR

spark-submit's own ``--master`` picks the cluster; the session it made is used as is.
"""

import sys

from trocket.spark.main import main

if __name__ == "__main__":
    sys.exit(main())
