"""A disposable stage (the suite's synth: ``retain=false``): its data goes with the stack,
it reserves no concurrency and has only the four core alarms (its cost at rest stays
within $60); the retained variants are checked on test_checks.py's ``prod`` synth and,
for the stage names, in test_context.py (issue 19, "Data safety and teardown")."""

from __future__ import annotations


def test_a_disposable_stage_deletes_every_data_store_with_the_stack(synthesized):
    for kind in ("AWS::DynamoDB::Table", "AWS::KMS::Key", "AWS::EFS::FileSystem",
                 "AWS::S3Vectors::VectorBucket", "AWS::Cognito::UserPool",
                 "AWS::Logs::LogGroup", "AWS::S3::Bucket"):  # the console's buckets too
        found = synthesized.of_type(kind)
        assert found, kind
        assert {r.get("DeletionPolicy") for r in found.values()} == {"Delete"}, kind
    tables = synthesized.of_type("AWS::DynamoDB::Table").values()
    assert [t["Properties"]["DeletionProtectionEnabled"] for t in tables] == [False] * 3
    (efs,) = synthesized.of_type("AWS::EFS::FileSystem").values()
    assert efs["Properties"].get("BackupPolicy", {"Status": "DISABLED"}) == {"Status": "DISABLED"}


def test_a_disposable_stage_reserves_no_concurrency(synthesized):
    for fn in synthesized.of_type("AWS::Lambda::Function").values():
        assert "ReservedConcurrentExecutions" not in fn["Properties"]


def test_a_disposable_stage_has_the_core_alarms_only(synthesized):
    names = {a["Properties"]["AlarmName"] for a in
             synthesized.of_type("AWS::CloudWatch::Alarm").values()}
    assert names == {f"agentloom-test-{n}" for n in (
        "FailedExecutions", "DeadLetters", "UnknownOutcomes", "StepErrors")}
    # no rule and no schedule: no failures queue, no async failure destination
    assert "agentloom-test-trigger-failures" not in {
        q["Properties"].get("QueueName") for q in synthesized.of_type("AWS::SQS::Queue").values()}
    synthesized.assertions.resource_count_is("AWS::Lambda::EventInvokeConfig", 0)


def test_a_disposable_stage_deletes_its_vector_indexes_before_the_bucket(synthesized):
    (bucket,) = synthesized.of_type("AWS::S3Vectors::VectorBucket")
    (teardown,) = synthesized.of_type("Custom::VectorBucketTeardown").values()
    assert bucket in teardown["DependsOn"]  # CloudFormation deletes the teardown first
    assert teardown["Properties"]["VectorBucketName"] == "agentloom-test-kb"
    function = teardown["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    role = synthesized.resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    properties = synthesized.resources[role]["Properties"]
    assert "ManagedPolicyArns" not in properties
    (policy,) = properties["Policies"]
    actions = [s["Action"] for s in policy["PolicyDocument"]["Statement"]]
    assert actions == ["s3vectors:ListIndexes", "s3vectors:DeleteIndex",
                       ["logs:CreateLogStream", "logs:PutLogEvents"]]
    # the role outlives the custom resource's delete (its policy is inline, no
    # separate AWS::IAM::Policy that CloudFormation could delete first)
    assert not any({"Ref": role} in p["Properties"]["Roles"]
                   for p in synthesized.of_type("AWS::IAM::Policy").values())
