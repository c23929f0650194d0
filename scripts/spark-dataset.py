"""Per-host stage shares of a fwdscope dataset with Spark (pyspark), as docs/datasets.md shows.

Usage: python3 scripts/spark-dataset.py DATASET_DIR
Prints one JSON line per (host, stage): host, stage, samples, percent.
"""
import json
import sys

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

dataset = sys.argv[1]
spark = SparkSession.builder.master("local[1]").appName("fwdscope-dataset").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
# basePath keeps host= and run= as columns; host=*/run=* skips runs still being written.
stacks = spark.read.option("basePath", dataset).parquet(f"{dataset}/host=*/run=*/stacks.parquet")
by_host = (
    stacks.groupBy("host", "stage")
    .agg(F.sum("samples").alias("samples"))
    .withColumn("percent", 100.0 * F.col("samples") / F.sum("samples").over(Window.partitionBy("host")))
)
for r in by_host.collect():
    print(json.dumps({"host": r["host"], "stage": r["stage"], "samples": int(r["samples"]), "percent": r["percent"]}))
spark.stop()
