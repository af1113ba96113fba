"""Publish destinations behind factory.publish.Destination.

- directory.py: a local folder or ``file://`` URL (hard links where possible)
- s3.py: ``s3://bucket/prefix`` through boto3 (``AWS_ENDPOINT_URL`` for MinIO, Ceph, moto)
- upload.py: an ``http(s)://`` upload endpoint speaking the legacy upload API (twine's)
"""
