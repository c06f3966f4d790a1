"""``HttpApi``: API Gateway HTTP API → the api Lambda, behind a JWT authorizer.

By default a Cognito user pool (admin-created users, no self sign-up) and an app client
issue the tokens; with context ``jwtIssuer``/``jwtAudience`` an existing OIDC issuer does,
and no pool is created. The pool's MFA (TOTP) is context ``userPoolMfa`` (``OPTIONAL`` by
default, ``REQUIRED`` or ``OFF``). Every route is authorized (the api Lambda reads the verified
``sub``). The ``$default`` stage throttles and writes JSON access logs (no request bodies,
no tokens) to an encrypted log group.

With the web console (``console_origin``: its CloudFront origin, console.py) the API
answers CORS for that origin alone, and the pool gets a hosted-UI domain and a console app
client (authorization code grant with PKCE, no secret); the authorizer accepts both
clients' tokens. A preflight carries no Authorization header, and ``ANY /{proxy+}`` would
send it to the JWT authorizer (a 401 the browser reads as a CORS failure): an
``OPTIONS /{proxy+}`` route without authorizer takes it instead — a method route outranks
``ANY`` — and, CORS being configured, API Gateway answers the preflight itself
(docs/deploy.md "The console on AWS").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId", "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime", "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey", "status": "$context.status",
    "protocol": "$context.protocol", "responseLength": "$context.responseLength",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error", "sub": "$context.authorizer.claims.sub"}
# What the console sends beyond the CORS-safelisted headers (functions/agentloom/console/
# api.js, live.js; the API reads the last two: api/ resume and idempotent writes)
CORS_HEADERS = ("Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key")
CORS_METHODS = ("GET", "POST", "PUT", "DELETE", "OPTIONS")
CONSOLE_SCOPES = ("openid", "email", "profile")


def hosted_ui_url(scope: Construct, domain_prefix: str) -> str:
    """The Cognito hosted UI's base URL for ``domain_prefix`` (what
    ``UserPoolDomain.base_url()`` returns), known before the domain exists."""
    stack = cdk.Stack.of(scope)
    return f"https://{domain_prefix}.auth.{stack.region}.amazoncognito.com"


def default_domain_prefix(scope: Construct, prefix: str) -> str:
    """``<prefix>-<12 hex>``: the last group of the stack's id (a UUID), so the prefix is
    unique across accounts and regions, stable for the stack's life, and names no
    account."""
    stack_uuid = cdk.Fn.select(2, cdk.Fn.split("/", cdk.Stack.of(scope).stack_id))
    return f"{prefix}-{cdk.Fn.select(4, cdk.Fn.split('-', stack_uuid))}"


class HttpApi(Construct):
    """Attributes: ``api``, ``stage``, ``access_logs``, ``user_pool`` and ``client``
    (None with an existing issuer), ``mfa``, ``url``; with the console ``preflight`` (the
    OPTIONS route), and with the pool ``console_client`` and ``domain``."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 handler: lambda_.IFunction, key: kms.IKey, issuer: str | None = None,
                 audience: Sequence[str] = (), rate_limit: int = 50, burst_limit: int = 100,
                 mfa: cognito.Mfa = cognito.Mfa.OPTIONAL,
                 console_origin: str | None = None, console_domain_prefix: str | None = None,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.mfa = mfa
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        self.console_client: cognito.UserPoolClient | None = None
        self.domain: cognito.UserPoolDomain | None = None
        self.preflight: apigw.HttpRoute | None = None
        if issuer:
            authorizer: apigw.IHttpRouteAuthorizer = authorizers.HttpJwtAuthorizer(
                "Jwt", issuer, jwt_audience=list(audience))
        else:
            self.user_pool, self.client = self._user_pool(prefix, mfa, removal_policy)
            clients = [self.client]
            if console_origin is not None:
                assert console_domain_prefix is not None
                self.console_client = self._console_client(prefix, console_origin,
                                                           console_domain_prefix)
                clients.append(self.console_client)
            authorizer = authorizers.HttpUserPoolAuthorizer(
                "Cognito", self.user_pool, user_pool_clients=clients)
        cors = None if console_origin is None else apigw.CorsPreflightOptions(
            allow_origins=[console_origin], allow_headers=list(CORS_HEADERS),
            allow_methods=[apigw.CorsHttpMethod(m) for m in CORS_METHODS],
            max_age=cdk.Duration.hours(1))
        self.api = apigw.HttpApi(self, "Api", api_name=f"{prefix}-api",
                                 create_default_stage=False, cors_preflight=cors,
                                 default_authorizer=authorizer)
        integration = integrations.HttpLambdaIntegration("Lambda", handler)
        self.api.add_routes(path="/{proxy+}", methods=[apigw.HttpMethod.ANY],
                            integration=integration)
        if console_origin is not None:
            (self.preflight,) = self.api.add_routes(
                path="/{proxy+}", methods=[apigw.HttpMethod.OPTIONS],
                integration=integration, authorizer=apigw.HttpNoneAuthorizer())
        self.access_logs = logs.LogGroup(self, "AccessLogs",
                                         retention=logs.RetentionDays.THREE_MONTHS,
                                         encryption_key=key, removal_policy=removal_policy)
        self.stage = self.api.add_stage("Stage", stage_name="$default", auto_deploy=True,
                                        throttle=apigw.ThrottleSettings(
                                            rate_limit=rate_limit, burst_limit=burst_limit))
        cfn_stage = self.stage.node.default_child
        assert isinstance(cfn_stage, apigw.CfnStage)
        cfn_stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn,
            format=json.dumps(ACCESS_LOG_FORMAT, separators=(",", ":")))
        self.url = self.api.api_endpoint

    def _user_pool(self, prefix: str, mfa: cognito.Mfa, removal_policy: cdk.RemovalPolicy
                   ) -> tuple[cognito.UserPool, cognito.UserPoolClient]:
        pool = cognito.UserPool(
            self, "Users", user_pool_name=f"{prefix}-users", self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            password_policy=cognito.PasswordPolicy(
                min_length=12, require_digits=True, require_lowercase=True,
                require_uppercase=True, require_symbols=True),
            mfa=mfa, mfa_second_factor=None if mfa == cognito.Mfa.OFF else
            cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            deletion_protection=removal_policy == cdk.RemovalPolicy.RETAIN,
            removal_policy=removal_policy)
        client = pool.add_client(
            "Cli", user_pool_client_name=f"{prefix}-cli", generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=True),
            access_token_validity=cdk.Duration.hours(1),
            id_token_validity=cdk.Duration.hours(1),
            refresh_token_validity=cdk.Duration.days(30), prevent_user_existence_errors=True)
        return pool, client

    def _console_client(self, prefix: str, origin: str, domain_prefix: str
                        ) -> cognito.UserPoolClient:
        """The console's public client: the hosted UI's code grant with PKCE (Cognito
        requires no secret of a client without one), back to the console's URL only."""
        assert self.user_pool is not None
        self.domain = self.user_pool.add_domain("Domain", cognito_domain=cognito
                                                .CognitoDomainOptions(domain_prefix=domain_prefix))
        url = f"{origin}/"
        client = self.user_pool.add_client(
            "Console", user_pool_client_name=f"{prefix}-console", generate_secret=False,
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID, cognito.OAuthScope.EMAIL,
                        cognito.OAuthScope.PROFILE],  # CONSOLE_SCOPES
                callback_urls=[url], logout_urls=[url]),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            access_token_validity=cdk.Duration.hours(1),
            id_token_validity=cdk.Duration.hours(1),
            refresh_token_validity=cdk.Duration.hours(12),
            prevent_user_existence_errors=True, enable_token_revocation=True)
        # No sign-in API flow of its own (SRP, password): only the hosted UI signs in
        cfn = client.node.default_child
        assert isinstance(cfn, cognito.CfnUserPoolClient)
        cfn.explicit_auth_flows = ["ALLOW_REFRESH_TOKEN_AUTH"]
        return client
