"""The synthesized run state machine against the contract (docs/deploy.md, Contract)."""

from __future__ import annotations

from aws_cdk.assertions import Match

STEP = "agentloom.handlers.step.handler"


def _asl(synthesized):
    values = {f"{lid}.Arn": f"arn:aws:test:::{lid}" for lid in synthesized.resources}
    values |= {lid: f"ref-{lid}" for lid in synthesized.resources}
    values |= {f"{lid}.GroupId": f"sg-{lid}" for lid in synthesized.resources}
    return synthesized.definition(values)


def test_states_and_transitions(synthesized):
    asl = _asl(synthesized)
    states = asl["States"]
    assert asl["StartAt"] == "Step"
    assert set(states) == {"Step", "Next?", "RunCommand", "AfterCommand", "Rollover",
                           "RecordFailure", "Failed", "Succeed"}
    choices = {c.get("StringEquals") or tuple(o["StringEquals"] for o in c["Or"]): c["Next"]
               for c in states["Next?"]["Choices"]}
    assert choices == {"continue": "Step", "command": "RunCommand", "rollover": "Rollover",
                       ("done", "blocked", "stale"): "Succeed"}
    assert "Default" not in states["Next?"]  # an unknown next fails the execution loudly
    assert states["AfterCommand"]["Next"] == "Step"
    assert states["RunCommand"]["Next"] == "AfterCommand"
    assert states["Rollover"]["Next"] == "Succeed"
    assert states["RecordFailure"]["Next"] == "Failed"
    assert states["Failed"]["Type"] == "Fail"


def test_step_task_retries_timeout_and_catch(synthesized):
    states = _asl(synthesized)["States"]
    step_arn = "arn:aws:test:::" + synthesized.logical_id("AWS::Lambda::Function",
                                                           Handler=STEP)
    for name in ("Step", "RecordFailure"):
        task = states[name]
        assert task["Resource"] == "arn:aws:states:::lambda:invoke"
        assert task["Parameters"]["FunctionName"] == step_arn
        assert task["OutputPath"] == "$.Payload"
        fn = synthesized.resources[step_arn.rsplit(":", 1)[1]]["Properties"]
        assert task["TimeoutSeconds"] == fn["Timeout"] + 60
        service, unknown = task["Retry"]
        assert set(service["ErrorEquals"]) == {
            "Lambda.ServiceException", "Lambda.AWSLambdaException",
            "Lambda.SdkClientException", "Lambda.ClientExecutionTimeoutException",
            "Lambda.TooManyRequestsException"}
        assert (service["IntervalSeconds"], service["BackoffRate"],
                service["MaxAttempts"]) == (2, 2, 6)
        assert unknown["ErrorEquals"] == ["Lambda.Unknown"]
        assert (unknown["IntervalSeconds"], unknown["MaxAttempts"]) == (5, 2)
    assert states["Step"]["Parameters"]["Payload"] == {
        "run_id.$": "$.run_id", "generation.$": "$.generation", "command.$": "$.command"}
    assert states["Step"]["Catch"] == [{"ErrorEquals": ["States.ALL"],
                                        "ResultPath": "$.failure", "Next": "RecordFailure"}]
    assert states["RecordFailure"]["Parameters"]["Payload"] == {
        "run_id.$": "$.run_id", "generation.$": "$.generation",
        "command.$": "States.StringToJson('null')", "failure.$": "$.failure"}
    assert "Catch" not in states["RecordFailure"]


def test_run_command_is_sync_fargate_in_isolated_subnets(synthesized):
    states = _asl(synthesized)["States"]
    run = states["RunCommand"]
    params = run["Parameters"]
    assert run["Resource"] == "arn:aws:states:::ecs:runTask.sync"
    assert run["TimeoutSeconds"] == 3900
    assert params["LaunchType"] == "FARGATE" and params["PlatformVersion"] == "1.4.0"
    assert params["TaskDefinition.$"] == "$.command.task_definition"
    assert params["Overrides.$"] == "$.command.overrides"
    assert params["StartedBy.$"] == "$.run_id"
    vpc = params["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert vpc["AssignPublicIp"] == "DISABLED"
    isolated = {f"ref-{lid}" for lid, r in synthesized.of_type("AWS::EC2::Subnet").items()
                if r["Properties"]["MapPublicIpOnLaunch"] is False and "sandbox" in lid}
    assert set(vpc["Subnets"]) == isolated and len(isolated) == 1  # a non-prod stage: 1 AZ


def test_run_command_retries_only_before_a_task_started_and_keeps_how_it_ended(
        synthesized):
    states = _asl(synthesized)["States"]
    run = states["RunCommand"]
    (retry,) = run["Retry"]
    # RunTask API errors and Failures (no task exists); never States.TaskFailed or
    # States.ALL: a task that started may have run its command
    assert set(retry["ErrorEquals"]) == {"ECS.AmazonECSException", "ECS.ThrottlingException",
                                         "AmazonECS.Unknown"}  # not a 5xx: may have run
    assert (retry["IntervalSeconds"], retry["BackoffRate"], retry["MaxAttempts"]) == \
        (5, 2, 5)
    # success and failure land at the same path, so AfterCommand passes either on
    assert run["ResultSelector"] == {"Error": ""} and run["ResultPath"] == "$.command_task"
    assert run["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.command_task",
                             "Next": "AfterCommand"}]
    assert states["AfterCommand"]["Parameters"] == {
        "run_id.$": "$.run_id", "generation.$": "$.generation",
        "command": {"request_id.$": "$.command.request_id", "task.$": "$.command_task"}}


def test_rollover_starts_the_same_machine_with_the_next_generation(synthesized):
    rollover = _asl(synthesized)["States"]["Rollover"]
    assert rollover["Resource"] == "arn:aws:states:::states:startExecution"
    assert rollover["Parameters"] == {
        "StateMachineArn.$": "$$.StateMachine.Id", "Name.$": "$.next_execution.name",
        "Input": {"run_id.$": "$.run_id", "generation.$": "$.next_execution.generation",
                  "command.$": "States.StringToJson('null')"}}


def test_rollover_retries_counts_an_existing_execution_as_started_and_records_a_failure(
        synthesized):
    rollover = _asl(synthesized)["States"]["Rollover"]
    already, every = rollover["Retry"]
    # the first matching retrier applies: ExecutionAlreadyExists is not retried...
    assert already == {"ErrorEquals": ["StepFunctions.ExecutionAlreadyExistsException"],
                       "MaxAttempts": 0}
    assert every["ErrorEquals"] == ["States.ALL"]
    assert (every["IntervalSeconds"], every["BackoffRate"], every["MaxAttempts"]) == (2, 2, 6)
    # ...but caught as success; any other final failure is recorded (the run: resume)
    assert rollover["Catch"] == [
        {"ErrorEquals": ["StepFunctions.ExecutionAlreadyExistsException"], "Next": "Succeed"},
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "RecordFailure"}]


def test_standard_logging_errors_without_data_and_tracing(synthesized):
    # ERROR by default (context stateMachineLogLevel; test_checks: ALL from context)
    synthesized.assertions.has_resource_properties("AWS::StepFunctions::StateMachine", {
        "StateMachineName": "agentloom-test-run", "StateMachineType": "STANDARD",
        "TracingConfiguration": {"Enabled": True},
        "LoggingConfiguration": {"Level": "ERROR", "IncludeExecutionData": False,
                                 "Destinations": Match.any_value()}})


def test_machine_role_may_start_only_itself_and_run_only_sandbox_families(synthesized):
    role_policy = Match.object_like({"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": "ecs:RunTask", "Condition": {"ArnEquals": {
            "ecs:cluster": Match.any_value()}}}),
        Match.object_like({"Action": "iam:PassRole", "Condition": {"StringEquals": {
            "iam:PassedToService": "ecs-tasks.amazonaws.com"}}}),
        Match.object_like({"Action": "states:StartExecution", "Resource": {"Fn::Join": [
            "", ["arn:", {"Ref": "AWS::Partition"}, ":states:", {"Ref": "AWS::Region"},
                 ":", {"Ref": "AWS::AccountId"}, ":stateMachine:agentloom-test-run"]]}}),
    ])}})
    synthesized.assertions.has_resource_properties("AWS::IAM::Policy", role_policy)
