"""The serve step's internals: the HTTP server (TF Serving's REST API), the request/response
codec and the loaded models. Entry point: ``estflow.components.serve``."""
