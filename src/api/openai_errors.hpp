#pragma once
// Errors as OpenAI's clients read them, for every answer under /v1 (api/routes.cpp sets it as
// the route table's shape there; elsewhere errors stay {"detail": ...}):
//
//   {"error": {"message": <detail>, "type": <by status>, "param": null, "code": <code>}}
//
//   status   answered as   type                    code when the thrower named none
//   400/422  400           invalid_request_error   invalid_request
//   401      401           invalid_request_error   invalid_api_key
//   403      403           permission_error        permission_denied
//   404      404           invalid_request_error   not_found ("model_not_found" for a model)
//   405      405           invalid_request_error   method_not_allowed
//   413      413           invalid_request_error   request_too_large
//   429      429           rate_limit_error        rate_limit_exceeded
//   5xx      as is         server_error            the status's name ("service_unavailable")
//   other 4xx as is        invalid_request_error   invalid_request
//
// 422 becomes 400 as OpenAI answers an invalid parameter; the official clients map the status
// to their error class (BadRequestError, AuthenticationError, NotFoundError, ...) and read
// message, type and code from this body.
#include "http/error.hpp"
#include "http/response.hpp"

namespace agentbox::api {

// An http::ErrorShape: rewrites an error answer's status and body in place, headers kept.
void shape_openai_error(http::Response& error);

}  // namespace agentbox::api
