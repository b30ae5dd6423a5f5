// Package lora is switchyard's side of vLLM's LoRA serving: the adapters the
// frontend knows (--lora-modules at start, /v1/load_lora_adapter at run time),
// their lora_int_id counter, pushing each one to every engine with the add_lora
// utility (an engine that joins or rejoins later gets them all), the rank
// preference for a request that names an adapter, and the vllm:lora_requests_info
// gauge from the engines' scheduler stats.
//
// vLLM's frontend keeps the same registry (OpenAIServingModels): a request whose
// model is an adapter's name is sent with that adapter's LoRARequest, and the
// engine loads the adapter from lora_path if add_lora has not already.
package lora
