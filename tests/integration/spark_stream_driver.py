"""A Spark driver for the restart test: reads a topic with the moldau source into parquet until it is killed.

    python spark_stream_driver.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT MAX_OFFSETS_PER_TRIGGER

The test kill -9s it between micro-batches and resumes the query from CHECKPOINT in its own Spark.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from spark_session import SPARK_CONF  # type: ignore[import-not-found]  # run as a script from this folder


def main() -> None:
    bootstrap, topic, checkpoint, output, max_offsets = sys.argv[1:6]
    builder = SparkSession.builder.master("local[2]").appName("moldau-restart-driver")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("maxOffsetsPerTrigger", max_offsets).load())
    query = (df.select("partition", "offset", "value").writeStream.format("parquet")
             .option("checkpointLocation", checkpoint).option("path", output)
             .trigger(processingTime="300 milliseconds").start())
    query.awaitTermination()


if __name__ == "__main__":
    main()
