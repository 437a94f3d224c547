"""Data validation: statistics of each run's data, a schema, anomalies, drift and skew.

The statistics, schemas and anomaly kinds are tensorflow-metadata's and TF Data Validation's
(``DatasetFeatureStatisticsList``, ``Schema``, ``AnomalyInfo.Type`` names), so TFDV and Facets
read what estflow writes. The modules import Beam and tensorflow-metadata: import them only in
steps, never from the DSL.
"""
