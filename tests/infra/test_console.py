"""The web console on AWS (infra/agentloom_infra/console.py, http_api.py) on the
synthesized template: a private bucket read by CloudFront alone (origin access control),
HTTPS and the security headers, the API's CORS for the distribution's origin and an
unauthorized preflight route, the Cognito console client and domain, config.json's
deploy-time values, the ConsoleUrl output; context ``console=false`` removes all of it
(its own synth)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from agentloom_infra import build_app
from aws_cdk.assertions import Template
from support.state_machine import CONTEXT

CORS_HEADERS = ["Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key"]


def render(node: Any) -> str:
    """A CloudFormation string value as text: ``Ref`` → ``<name>``, ``GetAtt`` →
    ``<id.attr>``, other intrinsics → ``<Fn::…>``."""
    if isinstance(node, str):
        return node
    if "Fn::Join" in node:
        sep, parts = node["Fn::Join"]
        return str(sep).join(render(p) for p in parts)
    if "Ref" in node:
        return f"<{node['Ref']}>"
    if "Fn::GetAtt" in node:
        return "<{}.{}>".format(*node["Fn::GetAtt"])
    return f"<{next(iter(node))}>"


def _one(synthesized, kind):
    (lid, resource), = synthesized.of_type(kind).items()
    return lid, resource["Properties"]


def _distribution(synthesized):
    return _one(synthesized, "AWS::CloudFront::Distribution")


def _site_bucket(synthesized):
    _, dist = _distribution(synthesized)
    (origin,) = dist["DistributionConfig"]["Origins"]
    return origin["DomainName"]["Fn::GetAtt"][0]


def _console_origin(synthesized):
    dist, _ = _distribution(synthesized)
    return f"https://<{dist}.DomainName>"


def test_the_site_bucket_is_private_and_read_by_the_distribution_alone(synthesized):
    site = _site_bucket(synthesized)
    props = synthesized.resources[site]["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True}
    assert "WebsiteConfiguration" not in props and "AccessControl" not in props
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    assert props["LoggingConfiguration"]["DestinationBucketName"]["Ref"] != site
    (policy,) = [p["Properties"] for p in synthesized.of_type("AWS::S3::BucketPolicy").values()
                 if p["Properties"]["Bucket"] == {"Ref": site}]
    statements = policy["PolicyDocument"]["Statement"]
    (tls,) = [s for s in statements if s["Effect"] == "Deny"]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    reads = [s for s in allowed if "s3:GetObject" in json.dumps(s["Action"])]
    dist, _ = _distribution(synthesized)
    (read,) = [s for s in reads if s["Principal"] == {"Service": "cloudfront.amazonaws.com"}]
    assert read["Action"] == "s3:GetObject"
    assert render(read["Condition"]["StringEquals"]["AWS:SourceArn"]) == \
        f"arn:<AWS::Partition>:cloudfront::<AWS::AccountId>:distribution/<{dist}>"
    # the only other grant: CDK's emptying of the bucket when the stack is deleted
    others = [s for s in allowed if s is not read]
    assert [render(s["Principal"]["AWS"]) for s in others] == [
        "<CustomS3AutoDeleteObjectsCustomResourceProviderRole3B1BD092.Arn>"]
    assert "s3:GetObject" not in others[0]["Action"]


def test_the_distribution_uses_an_origin_access_control_https_and_logs(synthesized):
    _, dist = _distribution(synthesized)
    config = dist["DistributionConfig"]
    (origin,) = config["Origins"]
    assert "OriginAccessControlId" in origin
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}  # no OAI
    assert not synthesized.of_type("AWS::CloudFront::CloudFrontOriginAccessIdentity")
    _, oac = _one(synthesized, "AWS::CloudFront::OriginAccessControl")
    assert oac["OriginAccessControlConfig"] | {"Name": None} == {
        "Name": None, "OriginAccessControlOriginType": "s3", "SigningBehavior": "always",
        "SigningProtocol": "sigv4"}
    behavior = config["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "redirect-to-https"
    assert behavior["AllowedMethods"] == ["GET", "HEAD"]
    assert config["DefaultRootObject"] == "index.html"
    assert config["Logging"]["Prefix"] == "cloudfront/"
    assert "GeoRestriction" not in json.dumps(config)  # acknowledged, nag.py


def test_the_response_headers_are_the_csp_hsts_and_no_framing(synthesized):
    _, policy = _one(synthesized, "AWS::CloudFront::ResponseHeadersPolicy")
    headers = policy["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    _, domain = _one(synthesized, "AWS::Cognito::UserPoolDomain")
    hosted_ui = f"https://{render(domain['Domain'])}.auth.<AWS::Region>.amazoncognito.com"
    csp = dict(d.split(" ", 1) for d in
               render(headers["ContentSecurityPolicy"]["ContentSecurityPolicy"]).split("; "))
    assert csp == {
        "default-src": "'self'", "script-src": "'self'", "style-src": "'self'",
        "img-src": "'self' data:", "font-src": "'self'", "object-src": "'none'",
        "base-uri": "'none'", "frame-ancestors": "'none'",
        "connect-src": "'self' https://*.execute-api.<AWS::Region>.<AWS::URLSuffix> "
                       + hosted_ui,
        "form-action": f"'self' {hosted_ui}"}
    assert headers["ContentSecurityPolicy"]["Override"] is True
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] >= 31536000
    assert headers["StrictTransportSecurity"]["IncludeSubdomains"] is True
    assert headers["FrameOptions"]["FrameOption"] == "DENY"
    assert headers["ContentTypeOptions"] == {"Override": True}
    assert headers["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"


def test_the_api_allows_exactly_the_distribution_origin(synthesized):
    _, api = _one(synthesized, "AWS::ApiGatewayV2::Api")
    cors = api["CorsConfiguration"]
    assert [render(o) for o in cors["AllowOrigins"]] == [_console_origin(synthesized)]
    assert cors["AllowMethods"] == ["GET", "POST", "PUT", "DELETE", "OPTIONS"]
    assert cors["AllowHeaders"] == CORS_HEADERS
    assert cors["MaxAge"] == 3600 and "AllowCredentials" not in cors


def test_preflights_take_an_unauthorized_route_to_the_same_integration(synthesized):
    routes = {r["Properties"]["RouteKey"]: r["Properties"]
              for r in synthesized.of_type("AWS::ApiGatewayV2::Route").values()}
    assert set(routes) == {"ANY /{proxy+}", "OPTIONS /{proxy+}"}
    assert routes["ANY /{proxy+}"]["AuthorizationType"] == "JWT"
    assert routes["OPTIONS /{proxy+}"]["AuthorizationType"] == "NONE"
    assert "AuthorizerId" not in routes["OPTIONS /{proxy+}"]
    assert routes["OPTIONS /{proxy+}"]["Target"] == routes["ANY /{proxy+}"]["Target"]


def _clients(synthesized):
    return {c["Properties"]["ClientName"]: (lid, c["Properties"])
            for lid, c in synthesized.of_type("AWS::Cognito::UserPoolClient").items()}


def test_the_console_client_is_a_public_code_grant_back_to_the_console(synthesized):
    _, client = _clients(synthesized)["agentloom-test-console"]
    url = _console_origin(synthesized) + "/"
    assert client["AllowedOAuthFlows"] == ["code"]
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    assert client["GenerateSecret"] is False
    assert client["AllowedOAuthScopes"] == ["openid", "email", "profile"]
    assert [render(u) for u in client["CallbackURLs"]] == [url]
    assert [render(u) for u in client["LogoutURLs"]] == [url]
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    assert client["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]  # hosted UI only
    _, domain = _one(synthesized, "AWS::Cognito::UserPoolDomain")
    assert render(domain["Domain"]).startswith("agentloom-test-<Fn::Select>")
    assert "CustomDomainConfig" not in domain


def test_the_authorizer_accepts_the_cli_and_the_console_clients(synthesized):
    _, authorizer = _one(synthesized, "AWS::ApiGatewayV2::Authorizer")
    clients = _clients(synthesized)
    assert sorted(a["Ref"] for a in authorizer["JwtConfiguration"]["Audience"]) == sorted(
        clients[name][0] for name in ("agentloom-test-cli", "agentloom-test-console"))


def test_config_json_is_written_at_deploy_time_and_the_url_is_an_output(synthesized):
    _, deploy = _one(synthesized, "Custom::CDKBucketDeployment")
    api, _ = _one(synthesized, "AWS::ApiGatewayV2::Api")
    _, domain = _one(synthesized, "AWS::Cognito::UserPoolDomain")
    console_client, _ = _clients(synthesized)["agentloom-test-console"]
    files, config = deploy["SourceMarkers"]  # the folder's asset, then config.json's
    assert files == {}
    # each marker is a JSON string value of config.json
    assert sorted(render(v) for v in config.values()) == sorted([
        f'"<{api}.ApiEndpoint>"', f'"<{console_client}>"',
        f'"https://{render(domain["Domain"])}.auth.<AWS::Region>.amazoncognito.com"',
        f'"{_console_origin(synthesized)}/"'])
    dist, _ = _distribution(synthesized)
    assert deploy["DestinationBucketName"] == {"Ref": _site_bucket(synthesized)}
    assert (deploy["DistributionId"], deploy["DistributionPaths"]) == ({"Ref": dist}, ["/*"])
    assert deploy["SystemMetadata"] == {"cache-control": "no-cache"}
    assert deploy["Prune"] is True
    output = synthesized.template["Outputs"]["ConsoleUrl"]["Value"]
    assert render(output) == _console_origin(synthesized) + "/"


def test_without_the_console_files_the_synth_says_what_to_do(tmp_path, monkeypatch):
    from agentloom_infra import console

    monkeypatch.setattr(console, "CONSOLE_DIR", tmp_path / "console")
    stack = cdk.Stack(cdk.App(), "Bare")
    with pytest.raises(FileNotFoundError, match="-c console=false"):
        console.ConsoleSite(stack, "Console", sign_in=None,
                            removal_policy=cdk.RemovalPolicy.DESTROY)


@pytest.mark.slow  # its own synth (~15 s)
def test_console_false_leaves_the_console_out():
    template = Template.from_stack(build_app(cdk.App(context={**CONTEXT,
                                                              "console": "false"})))
    for kind in ("AWS::CloudFront::Distribution", "AWS::CloudFront::ResponseHeadersPolicy",
                 "AWS::CloudFront::OriginAccessControl", "AWS::S3::Bucket",
                 "Custom::CDKBucketDeployment", "AWS::Cognito::UserPoolDomain"):
        template.resource_count_is(kind, 0)
    clients = template.find_resources("AWS::Cognito::UserPoolClient")
    assert [c["Properties"]["ClientName"] for c in clients.values()] == ["agentloom-test-cli"]
    (api,) = template.find_resources("AWS::ApiGatewayV2::Api").values()
    assert "CorsConfiguration" not in api["Properties"]
    routes = template.find_resources("AWS::ApiGatewayV2::Route")
    assert [r["Properties"]["RouteKey"] for r in routes.values()] == ["ANY /{proxy+}"]
    assert "ConsoleUrl" not in template.to_json()["Outputs"]
