"""Packaging of ldp-telemetry."""
from setuptools import setup

setup(
    name="ldp-telemetry",
    version="0.1.0",
    description="Streaming aggregation of telemetry collected under local differential privacy, "
                "on Apache Beam.",
    python_requires=">=3.10",
    packages=["ldp", "ldp.protocols", "schemas", "transforms", "pipelines", "runners"],
    package_data={"schemas": ["*.avsc"]},
    install_requires=["apache-beam>=2.60", "numpy>=2.0", "scipy>=1.10", "fastavro>=1.9",
                      "cramjam>=2.6"],  # fastavro's snappy codec
    extras_require={"test": ["pytest>=7", "avro>=1.11"],
                    # DataflowRunner, including its offline dry run (about 85 more packages)
                    "dataflow": ["apache-beam[gcp]"]},
    entry_points={"console_scripts": ["ldp=pipelines.cli:main"]},
)
