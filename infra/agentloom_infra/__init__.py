"""The CDK app's constructs (issue 11). Imports aws_cdk only; refers to the Lambda
handlers by string and asset path, never by importing them."""
