"""PySpark analysis of captured RocketMQ traffic (issue 9): ``trocket analyze``.

Modules, in the order the job uses them:

- :mod:`.inputs` the captures named (folders walked, formats sniffed) and
  :mod:`.problems` what could not be read, and the exit-status rule; :mod:`.storage`
  local paths and ``s3://``/``hdfs://`` URIs opened through ``pyarrow.fs``;
- :mod:`.job` the job: the stretches, the resolve stage, the summary;
- :mod:`.native` native captures cut into ranges on record boundaries and read;
- :mod:`.pcap` pcap/pcapng: packets read in ranges, grouped by connection, reassembled;
- :mod:`.rows` one frame -> one ``frames`` row (decoded with ``trocket.codecs``);
- :mod:`.stretch` one pass over a task's frames: both tables' parts, the pairing, the tally;
- :mod:`.calls` requests paired with responses (in the stretch, then the leftovers);
- :mod:`.streams` pieces of a connection in several captures stitched into one stream;
- :mod:`.arrow` rows -> Arrow batches -> Parquet parts (how rows leave the Python executors);
- :mod:`.summary` tallies merged into ``summary.json`` (exact latency percentiles);
  :mod:`.report` ``report.html`` and the console summary;
- :mod:`.follow` the live mode (``--follow DIR``): :mod:`.tap_source` the Structured
  Streaming source over a tap's rotated files, :mod:`.live_tally` the per-minute
  aggregates, :mod:`.live_report` its self-reloading page;
- :mod:`.session` the SparkSession and the progress line; :mod:`.main` the driver shared
  by the CLI and :mod:`.submit` (the ``spark-submit`` entry point);
- :mod:`.synth` synthetic captures with their ground truth (``trocket capture synth``).

Everything that needs PySpark imports it inside functions: ``import trocket.spark`` and
the pure modules (rows, native, calls, synth) work without the ``spark`` extra.
"""
