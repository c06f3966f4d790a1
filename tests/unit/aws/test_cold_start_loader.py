"""``ColdStartLoader`` loads what botocore's loader loads, for the services the functions
call, without listing every service folder of botocore's data directory."""

from __future__ import annotations

import os

import botocore.loaders
import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError

from agentloom.aws._botocore import ColdStartLoader, cold_start_session

SERVICES = ("dynamodb", "kms", "stepfunctions", "ecs", "efs", "s3vectors")


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_model_is_botocores(service):
    ours, theirs = ColdStartLoader(), botocore.loaders.Loader()
    for type_name in ("service-2", "endpoint-rule-set-1"):
        assert ours.load_service_model(service, type_name) == \
            theirs.load_service_model(service, type_name)
    assert ours.load_data("endpoints") == theirs.load_data("endpoints")
    assert type(ours.load_data("endpoints")) is dict


def test_a_client_is_made_without_listing_the_services(monkeypatch):
    data = ColdStartLoader.BUILTIN_DATA_PATH
    listed: list[str] = []
    real = os.listdir

    def listdir(path: str | os.PathLike[str] = ".") -> list[str]:
        listed.append(os.fspath(path))
        return real(path)

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    session = cold_start_session()
    monkeypatch.setattr(os, "listdir", listdir)
    client = session.create_client("dynamodb", region_name="eu-west-1")
    assert client.meta.region_name == "eu-west-1"
    assert "PutItem" in client.meta.service_model.operation_names
    assert data not in listed  # botocore's loader lists it (every service) twice
    assert {p for p in listed if p.startswith(data)} <= {os.path.join(data, "dynamodb")}


def test_unknown_services_and_the_full_listing_are_botocores():
    ours, theirs = ColdStartLoader(), botocore.loaders.Loader()
    with pytest.raises(UnknownServiceError):
        ours.load_service_model("no-such-service", "service-2")
    assert "../dynamodb" not in ours.list_available_services("service-2")
    assert list(ours.list_available_services("service-2")) == \
        theirs.list_available_services("service-2")
    session = cold_start_session()
    assert list(session.get_available_services()) == \
        botocore.session.get_session().get_available_services()
