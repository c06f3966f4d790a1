"""``ConsoleSite``: the web console (functions/agentloom/console/, static files, no build)
on a private S3 bucket behind CloudFront (docs/deploy.md "The console on AWS").

- The bucket blocks all public access, refuses plain HTTP and is read by the distribution
  alone, through an origin access control (its bucket policy names
  ``cloudfront.amazonaws.com`` with the distribution's ARN as ``AWS:SourceArn``). It is
  S3-managed encrypted: an OAC reads SSE-KMS objects only if the key policy lets
  CloudFront decrypt, and the stage's one key guards its data — the console's files are
  the same for every user and hold no secret (config.json names a public client), so they
  do not get to widen that key's policy.
- The distribution redirects HTTP to HTTPS, serves index.html at ``/`` and adds the
  security headers of ``csp`` and ``EXTRA_HEADERS`` (no inline script or style, no
  framing, no referrer, HSTS). On its default ``*.cloudfront.net`` certificate CloudFront
  fixes the viewer security policy (a minimum TLS version applies only with a custom
  domain's certificate); browsers negotiate TLS 1.2 or 1.3 with it. Its standard logs and
  the bucket's server access logs go to one log bucket (S3-managed: CloudFront's standard
  logging cannot write SSE-KMS; ACLs enabled: it writes with one), kept 90 days like the
  API's access logs.
- ``deploy`` copies the folder and ``config.json`` (``Source.json_data``: the API's URL,
  the hosted UI and client, resolved when the deployment runs) and invalidates the cache;
  every file is ``no-cache`` (the modules have no content hash: a browser revalidates).

The API's CORS needs the distribution's domain, so the distribution cannot name the API's
id: the CSP allows ``https://*.execute-api.<region>.amazonaws.com`` — a true cycle (the
API's CorsConfiguration and the distribution's headers each need the other's generated
id), and script-src 'self' keeps any other script from using that allowance. The Cognito
domain is exact (its prefix is known before it exists).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from agentloom_infra.bundling import CONSOLE_DIR  # functions/agentloom/console

LOG_DAYS = 90
HSTS_DAYS = 365
# What agentloom serve sends too (functions/agentloom/api/console_assets.py)
EXTRA_HEADERS = {"Cross-Origin-Opener-Policy": "same-origin",
                 "Permissions-Policy": "camera=(), microphone=(), geolocation=()"}


def csp(*, api: str, sign_in: str | None) -> str:
    """The console's Content-Security-Policy: its own files, the API, the sign-in origin
    (the token endpoint is fetched, the hosted UI is a redirect target)."""
    connect = " ".join(["'self'", api, *([sign_in] if sign_in else [])])
    form = " ".join(["'self'", *([sign_in] if sign_in else [])])
    return ("default-src 'self'; script-src 'self'; style-src 'self'; "
            f"img-src 'self' data:; connect-src {connect}; font-src 'self'; "
            f"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action {form}")


class ConsoleSite(Construct):
    """Attributes: ``bucket``, ``logs``, ``distribution``, ``headers`` (the response
    headers policy), ``origin`` (``https://<domain>``, no slash), ``url`` (with it) and,
    after ``deploy``, ``deployment``."""

    def __init__(self, scope: Construct, construct_id: str, *, sign_in: str | None,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        if not (CONSOLE_DIR / "index.html").is_file():
            raise FileNotFoundError(f"the console's files are missing ({CONSOLE_DIR}/"
                                    "index.html): deploy from a full checkout, or pass "
                                    "-c console=false")
        stack = cdk.Stack.of(self)
        disposable = removal_policy == cdk.RemovalPolicy.DESTROY
        self.logs = s3.Bucket(
            self, "Logs", encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.OBJECT_WRITER,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(LOG_DAYS))],
            removal_policy=removal_policy, auto_delete_objects=disposable)
        # Rebuilt from the repository by every deploy: nothing in it to retain
        self.bucket = s3.Bucket(
            self, "Site", encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
            server_access_logs_bucket=self.logs, server_access_logs_prefix="site/",
            removal_policy=cdk.RemovalPolicy.DESTROY, auto_delete_objects=True)
        api = f"https://*.execute-api.{stack.region}.{stack.url_suffix}"
        self.headers = cloudfront.ResponseHeadersPolicy(
            self, "Headers", comment="AgentLoom console: CSP, HSTS, no framing",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=csp(api=api, sign_in=sign_in), override=True),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=cdk.Duration.days(HSTS_DAYS),
                    include_subdomains=True, override=True),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(
                    override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER,
                    override=True)),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[cloudfront.ResponseCustomHeader(header=k, value=v,
                                                                override=True)
                                for k, v in EXTRA_HEADERS.items()]))
        self.distribution = cloudfront.Distribution(
            self, "Distribution", comment=f"AgentLoom console ({stack.stack_name})",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers, compress=True),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            enable_logging=True, log_bucket=self.logs, log_file_prefix="cloudfront/")
        self.origin = f"https://{self.distribution.distribution_domain_name}"
        self.url = f"{self.origin}/"
        self.deployment: s3deploy.BucketDeployment | None = None

    def deploy(self, config: Mapping[str, Any]) -> s3deploy.BucketDeployment:
        """The console's files and ``config.json`` (tokens in ``config`` are resolved at
        deploy time by the deployment's custom resource)."""
        self.deployment = s3deploy.BucketDeployment(
            self, "Deploy", destination_bucket=self.bucket,
            sources=[s3deploy.Source.asset(str(CONSOLE_DIR), exclude=["config.json"]),
                     s3deploy.Source.json_data("config.json", dict(config))],
            cache_control=[s3deploy.CacheControl.no_cache()], prune=True,
            distribution=self.distribution, distribution_paths=["/*"])
        return self.deployment
