"""PySpark analysis of captured RocketMQ traffic (issue 9): ``trocket analyze``.

Modules, in the order the job uses them:

- :mod:`.job` the job: inputs, the frames DataFrame, the calls DataFrame, Parquet;
- :mod:`.native` native captures cut into ranges on record boundaries and read;
- :mod:`.pcap` pcap/pcapng: packets read in ranges, grouped by connection, reassembled;
- :mod:`.rows` one frame -> one ``frames`` row (decoded with ``trocket.codecs``);
- :mod:`.arrow` rows -> Arrow batches (how rows leave the Python executors);
- :mod:`.summary` ``summary.json``; :mod:`.report` ``report.html`` and the console summary;
- :mod:`.session` the SparkSession and the progress line; :mod:`.main` the driver shared
  by the CLI and :mod:`.submit` (the ``spark-submit`` entry point);
- :mod:`.synth` synthetic captures with their ground truth (``trocket capture synth``).

Everything that needs PySpark imports it inside functions: ``import trocket.spark`` and
the pure modules (rows, native, synth) work without the ``spark`` extra.
"""
