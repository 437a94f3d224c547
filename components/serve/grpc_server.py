"""TF Serving's gRPC API over the model registry: ``PredictionService`` and ``ModelService``.

Served from the ``tensorflow-serving-api`` protos, so TF Serving's own client stubs
(``prediction_service_pb2_grpc.PredictionServiceStub``,
``model_service_pb2_grpc.ModelServiceStub``) work unchanged::

    PredictionService/Predict           inputs (TensorProto map) -> outputs
    PredictionService/Classify          Input (tf.Examples) -> ClassificationResult
    PredictionService/Regress           Input (tf.Examples) -> RegressionResult
    PredictionService/MultiInference    one Input, several classify/regress tasks of one model
    PredictionService/GetModelMetadata  metadata_field ["signature_def"] -> SignatureDefMap
    ModelService/GetModelStatus         model_version_status of a model (or one version)
    ModelService/HandleReloadConfigRequest  UNIMPLEMENTED (models are found by polling)

Every request runs through the same inference core as REST
(:meth:`estflow.components.serve.models.ServedModel.predict` / ``classify`` / ``regress``), so
the two answer alike. Errors carry TF Serving's status codes: INVALID_ARGUMENT for a bad request
(FAILED_PRECONDITION for Predict on a signature the model lacks, as TF Serving), NOT_FOUND for an unknown model or version, RESOURCE_EXHAUSTED for a message over the size
limit (gRPC's own check), INTERNAL for a bug.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.protobuf import json_format
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import inference_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc
from tensorflow_serving.apis import regression_pb2

from estflow.components.serve import grpc_codec as pc
from estflow.components.serve.errors import ServingError
from estflow.components.serve.metrics import Metrics
from estflow.components.serve.models import CLASSIFY
from estflow.components.serve.models import REGRESS
from estflow.components.serve.models import ServedModel
from estflow.components.serve.registry import ModelRegistry

__all__ = ["GrpcServer", "start_grpc", "STATUS_CODES"]

log = logging.getLogger("estflow.serve")

STATUS_CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
                409: grpc.StatusCode.FAILED_PRECONDITION,
                413: grpc.StatusCode.RESOURCE_EXHAUSTED, 429: grpc.StatusCode.RESOURCE_EXHAUSTED,
                501: grpc.StatusCode.UNIMPLEMENTED, 503: grpc.StatusCode.UNAVAILABLE,
                504: grpc.StatusCode.DEADLINE_EXCEEDED}
"""The gRPC code of a :class:`ServingError`'s HTTP status (TF Serving's ToHTTPStatusCode,
read backwards); any other status is INTERNAL."""

_TASK_METHODS = {CLASSIFY: "classification_result", REGRESS: "regression_result"}


class _GrpcError(ServingError):
    """An error with its own gRPC code (one that no HTTP status stands for)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(400, message)
        self.code = code


class _Call:
    """What one RPC learnt about itself, for the metrics: the model version and signature."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.signature = ""


def _rpc(api: str) -> Callable:
    """Answer ``api`` RPCs: a :class:`ServingError` aborts with its status code, a bug with
    INTERNAL; the outcome and latency go to the server's metrics."""
    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def handler(self: _Services, request: Any, context: grpc.ServicerContext) -> Any:
            start, call, code = time.perf_counter(), _Call(), grpc.StatusCode.OK
            try:
                return method(self, request, call)
            except ServingError as e:
                code = getattr(e, "code", None) or STATUS_CODES.get(e.status,
                                                                    grpc.StatusCode.INTERNAL)
                message = self.registry.public(e.message)  # no server paths to clients
            except Exception as e:  # noqa: BLE001 - a bug must still answer the client
                log.exception("internal error serving gRPC %s", api)
                code = grpc.StatusCode.INTERNAL
                message = self.registry.public(f"internal error: {type(e).__name__}: {e}")
            finally:
                self.metrics.observe("GRPC", api, _model_name(request), call.version,
                                     call.signature, code.name, time.perf_counter() - start)
            context.abort(code, message)
        return handler
    return wrap


def _model_name(request: Any) -> str:
    if hasattr(request, "model_spec"):
        return request.model_spec.name
    tasks = getattr(request, "tasks", ())
    return tasks[0].model_spec.name if tasks else ""


class _Services(prediction_service_pb2_grpc.PredictionServiceServicer,
                model_service_pb2_grpc.ModelServiceServicer):
    """Both services over one registry."""

    def __init__(self, registry: ModelRegistry, metrics: Metrics) -> None:
        self.registry = registry
        self.metrics = metrics

    def _model(self, spec: Any, call: _Call) -> ServedModel:
        """The model a ``ModelSpec`` names (NOT_FOUND when it is not served)."""
        if not spec.name:
            raise ServingError(400, "model_spec.name is required: the name of a served model")
        if spec.WhichOneof("version_choice") == "version_label":
            model = self.registry.get(spec.name, label=spec.version_label)
        else:
            model = self.registry.get(spec.name,
                                      spec.version.value if spec.HasField("version") else None)
        call.version = model.version
        return model

    @_rpc("Predict")
    def Predict(self, request: predict_pb2.PredictRequest, call: _Call):  # noqa: N802
        model = self._model(request.model_spec, call)
        name = request.model_spec.signature_name or model.default_signature()
        if name not in model.signatures:
            raise _GrpcError(grpc.StatusCode.FAILED_PRECONDITION,
                             f"Serving signature key {name!r} not found; model {model.name!r} "
                             f"version {model.version} has {', '.join(sorted(model.signatures))}")
        signature = model.signature(name)
        call.signature = signature.name
        inputs = {name: pc.to_array(proto, name, signature.inputs[name].dtype)
                  if name in signature.inputs else proto
                  for name, proto in request.inputs.items()}
        filters = tuple(request.output_filter)
        if len(set(filters)) != len(filters):
            raise ServingError(400, f"duplicate output tensor alias in output_filter: "
                               f"{', '.join(filters)}")
        signature, outputs = model.predict(signature.name, inputs, filters)
        response = predict_pb2.PredictResponse(
            model_spec=pc.model_spec(model.name, model.version, signature.name))
        for name, array in outputs.items():
            response.outputs[name].CopyFrom(pc.to_tensor_proto(array))
        return response

    @_rpc("Classify")
    def Classify(self, request: classification_pb2.ClassificationRequest,  # noqa: N802
                 call: _Call):
        model = self._model(request.model_spec, call)
        call.signature = request.model_spec.signature_name
        signature, rows = model.classify(request.model_spec.signature_name,
                                         pc.serialized_examples(request.input))
        call.signature = signature.name
        return classification_pb2.ClassificationResponse(
            model_spec=pc.model_spec(model.name, model.version, signature.name),
            result=pc.classification_result(rows))

    @_rpc("Regress")
    def Regress(self, request: regression_pb2.RegressionRequest, call: _Call):  # noqa: N802
        model = self._model(request.model_spec, call)
        call.signature = request.model_spec.signature_name
        signature, values = model.regress(request.model_spec.signature_name,
                                          pc.serialized_examples(request.input))
        call.signature = signature.name
        return regression_pb2.RegressionResponse(
            model_spec=pc.model_spec(model.name, model.version, signature.name),
            result=pc.regression_result(values))

    @_rpc("MultiInference")
    def MultiInference(self, request: inference_pb2.MultiInferenceRequest,  # noqa: N802
                       call: _Call):
        tasks = request.tasks
        if not tasks:
            raise ServingError(400, "MultiInferenceRequest.tasks is empty: add at least one "
                               "classify or regress task")
        _check_tasks(tasks)
        model = self._model(tasks[0].model_spec, call)
        examples = pc.serialized_examples(request.input)
        response = inference_pb2.MultiInferenceResponse()
        for task in tasks:
            result = response.results.add()
            if task.method_name == CLASSIFY:
                signature, rows = model.classify(task.model_spec.signature_name, examples)
                result.classification_result.CopyFrom(pc.classification_result(rows))
            else:
                signature, values = model.regress(task.model_spec.signature_name, examples)
                result.regression_result.CopyFrom(pc.regression_result(values))
            result.model_spec.CopyFrom(pc.model_spec(model.name, model.version,
                                                     signature.name))
        call.signature = ",".join(r.model_spec.signature_name for r in response.results)
        return response

    @_rpc("GetModelMetadata")
    def GetModelMetadata(self, request: get_model_metadata_pb2.GetModelMetadataRequest,  # noqa: N802
                         call: _Call):
        fields = list(request.metadata_field)
        if not fields:
            raise ServingError(400, "GetModelMetadataRequest must specify at least one "
                               "metadata_field (the one supported: 'signature_def')")
        for field in fields:
            if field != "signature_def":
                raise ServingError(400, f"Metadata field {field[:100]!r} is not supported; "
                                   "the one supported: 'signature_def'")
        model = self._model(request.model_spec, call)
        defs = get_model_metadata_pb2.SignatureDefMap()
        for name, signature_def in model.signature_defs.items():
            json_format.ParseDict(signature_def, defs.signature_def[name],
                                  ignore_unknown_fields=True)
        packed = any_pb2.Any()
        packed.Pack(defs)
        response = get_model_metadata_pb2.GetModelMetadataResponse(
            model_spec=pc.model_spec(model.name, model.version))
        response.metadata["signature_def"].CopyFrom(packed)
        return response

    @_rpc("GetModelStatus")
    def GetModelStatus(self, request: get_model_status_pb2.GetModelStatusRequest,  # noqa: N802
                       call: _Call):
        spec = request.model_spec
        if not spec.name:
            raise ServingError(400, "model_spec.name is required: the name of a served model")
        version = spec.version.value if spec.HasField("version") else None
        return pc.version_status(self.registry.status(spec.name, version))

    def HandleReloadConfigRequest(self, request: Any, context: grpc.ServicerContext):  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      "estflow serve finds models by polling its base path; it has no model "
                      "config to reload")


def _check_tasks(tasks: Any) -> None:
    """TF Serving's rules for MultiInference: one model, classify/regress tasks, no signature
    twice."""
    names = {task.model_spec.name for task in tasks}
    if len(names) != 1:
        raise ServingError(400, f"all MultiInference tasks must name the same model; got "
                           f"{', '.join(sorted(names))}")
    seen = set()
    for i, task in enumerate(tasks):
        if task.method_name not in _TASK_METHODS:
            raise ServingError(400, f"tasks[{i}].method_name must be {CLASSIFY!r} or "
                               f"{REGRESS!r}, got {task.method_name[:100]!r}")
        key = (task.model_spec.signature_name, task.method_name)
        if key in seen:
            raise ServingError(400, f"tasks[{i}] repeats signature "
                               f"{task.model_spec.signature_name!r}; each task must use a "
                               "distinct signature")
        seen.add(key)


class GrpcServer:
    """A running gRPC server (its own thread pool).

    Attributes:
        port: the bound port (the real one when started with port 0).
        address: ``host:port`` as a client dials it.
    """

    def __init__(self, server: grpc.Server, host: str, port: int) -> None:
        self._server = server
        self.port = port
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop accepting RPCs; those in flight get ``grace`` seconds to finish."""
        self._server.stop(grace).wait()


def start_grpc(registry: ModelRegistry, host: str, port: int, *, threads: int,
               max_message_bytes: int, metrics: Metrics | None = None) -> GrpcServer:
    """Serve both services for ``registry`` on ``host:port`` (0: a free port).

    Args:
        threads: RPCs answered at once (a bounded pool, as the HTTP side's).
        max_message_bytes: largest request accepted (RESOURCE_EXHAUSTED above it, gRPC's own
            check); answers may be as large as gRPC allows.
        metrics: where requests are counted (a private one when None).

    Raises:
        OSError: the address cannot be bound (the message names it).
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads,
                                                    thread_name_prefix="estflow-serve-grpc"),
                         options=[("grpc.max_receive_message_length", max_message_bytes),
                                  ("grpc.max_send_message_length", -1),
                                  ("grpc.so_reuseport", 0)])
    services = _Services(registry, metrics or Metrics())
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(services, server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(services, server)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(target)
    except RuntimeError as e:  # grpcio raises when the port is taken
        raise OSError(f"cannot listen for gRPC on {target}: {e}") from None
    if not bound:
        raise OSError(f"cannot listen for gRPC on {target}: the address is in use or invalid")
    server.start()
    return GrpcServer(server, host, bound)

