"""The HTTP API: one Powertools resolver (``app.build_app``) served by the Lambda
handler (``agentloom.handlers.api``) and by ``agentloom serve`` (``serve``, over
``server.ApiServer``), with request and response models (``models``), the generated
OpenAPI document (``openapi``) and a typed client (``client.Client``)."""
