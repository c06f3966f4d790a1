"""``DnsFirewall``: Route 53 Resolver DNS Firewall on the VPC — an allow-list, then block
every other name (NXDOMAIN), so DNS cannot tunnel data out of the sandbox subnets.

Security groups cannot filter DNS (the VPC resolver at .2 answers every subnet), and a
firewall rule group is associated with a whole VPC: the Lambdas resolve through the
same list. So the list is what either needs:

- AWS service names (``AWS_DOMAINS``): the sandbox's image pull and logs (ECR, the S3
  layer bucket, CloudWatch Logs), its EFS mount targets, and the Lambdas' AWS APIs (KMS,
  DynamoDB, Step Functions, ECS, EFS, X-Ray under ``amazonaws.com``; S3 Vectors under
  ``api.aws``). A name under these zones is answered by AWS's authoritative servers, so
  a query cannot carry data to a server a command controls.
- the built-in model providers' API hosts (``MODEL_DOMAINS``, the base URLs of
  functions/agentloom/models/catalogue.py; a test checks they agree).
- context ``dnsAllowedDomains``: every other host the Lambdas must reach — an
  ``openai_compatible`` connection's base URL, MCP servers (docs/deploy.md).

The firewall fails closed (Route 53's default): when it cannot answer, queries fail.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_route53resolver as resolver
from constructs import Construct

AWS_DOMAINS = ("amazonaws.com", "*.amazonaws.com", "*.api.aws")
MODEL_DOMAINS = ("api.openai.com", "api.deepseek.com")
ALLOW_PRIORITY, BLOCK_PRIORITY = 100, 200


class DnsFirewall(Construct):
    """Attributes: ``allowed`` (the domains allowed), ``rule_group``, ``association``."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc, prefix: str,
                 extra_domains: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id)
        self.allowed = sorted({*AWS_DOMAINS, *MODEL_DOMAINS, *extra_domains})
        allow = resolver.CfnFirewallDomainList(self, "Allowed", name=f"{prefix}-allowed",
                                               domains=self.allowed)
        everything = resolver.CfnFirewallDomainList(self, "Everything",
                                                    name=f"{prefix}-everything",
                                                    domains=["*"])
        self.rule_group = resolver.CfnFirewallRuleGroup(
            self, "Rules", name=f"{prefix}-dns", firewall_rules=[
                resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    action="ALLOW", priority=ALLOW_PRIORITY,
                    firewall_domain_list_id=allow.attr_id,
                    # an allowed name may CNAME to a CDN's (a provider behind CloudFront):
                    # the chain's other names are not checked against the list
                    firewall_domain_redirection_action="TRUST_REDIRECTION_DOMAIN"),
                resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    action="BLOCK", block_response="NXDOMAIN", priority=BLOCK_PRIORITY,
                    firewall_domain_list_id=everything.attr_id)])
        self.association = resolver.CfnFirewallRuleGroupAssociation(
            self, "Association", name=f"{prefix}-dns", vpc_id=vpc.vpc_id,
            firewall_rule_group_id=self.rule_group.attr_id, priority=101)
