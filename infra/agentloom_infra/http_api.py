"""``HttpApi``: API Gateway HTTP API → the api Lambda, behind a JWT authorizer.

By default a Cognito user pool (admin-created users, no self sign-up) and an app client
issue the tokens; with context ``jwtIssuer``/``jwtAudience`` an existing OIDC issuer does,
and no pool is created. The pool's MFA (TOTP) is context ``userPoolMfa`` (``OPTIONAL`` by
default, ``REQUIRED`` or ``OFF``). Every route is authorized (the api Lambda reads the verified
``sub``). The ``$default`` stage throttles and writes JSON access logs (no request bodies,
no tokens) to an encrypted log group.
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


class HttpApi(Construct):
    """Attributes: ``api``, ``stage``, ``access_logs``, ``user_pool`` and ``client``
    (None with an existing issuer), ``mfa``, ``url``."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 handler: lambda_.IFunction, key: kms.IKey, issuer: str | None = None,
                 audience: Sequence[str] = (), rate_limit: int = 50, burst_limit: int = 100,
                 mfa: cognito.Mfa = cognito.Mfa.OPTIONAL,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.mfa = mfa
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        if issuer:
            authorizer: apigw.IHttpRouteAuthorizer = authorizers.HttpJwtAuthorizer(
                "Jwt", issuer, jwt_audience=list(audience))
        else:
            self.user_pool, self.client = self._user_pool(prefix, mfa, removal_policy)
            authorizer = authorizers.HttpUserPoolAuthorizer(
                "Cognito", self.user_pool, user_pool_clients=[self.client])
        self.api = apigw.HttpApi(self, "Api", api_name=f"{prefix}-api",
                                 create_default_stage=False,
                                 default_authorizer=authorizer)
        self.api.add_routes(path="/{proxy+}", methods=[apigw.HttpMethod.ANY],
                            integration=integrations.HttpLambdaIntegration("Lambda", handler))
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
